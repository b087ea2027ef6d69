-- What every merge statement of one call reads with getvariable(): whose rows, the sync's instant, and the
-- contract version the service answered with.
SET VARIABLE workspace_id = $workspace_id;
SET VARIABLE now = CAST($now AS TIMESTAMPTZ);
SET VARIABLE service_version = $service_version;
