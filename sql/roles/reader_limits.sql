-- A reading role's limits (pipelines/commands/roles.py says why): read-only transactions unless asked
-- otherwise, and a statement's time, temporary files and sort memory bounded by default.
ALTER ROLE {role} SET default_transaction_read_only = on;
ALTER ROLE {role} SET statement_timeout = {statement_timeout};
ALTER ROLE {role} SET temp_file_limit = {temp_file_limit};
ALTER ROLE {role} SET work_mem = {work_mem};
