-- The history's database beside Dagster's instance (POSTGRES_DB), on the same server and role.
CREATE DATABASE scanwatch;
