-- scanwatch history, schema version 13: the views layer. Every derived rule (open and visible, SLA state,
-- first severity, workspace and project labels, critical arrivals, fix times, score days, first
-- observations, project fingerprints) is a view defined in sql/views/, and the writer recreates those views
-- whenever their texts differ from the ones this history holds: `view_layer` keeps the digest of the texts
-- the views were created from (one row, none while they are dropped). So migrations carry tables and data
-- only, and the views that earlier migrations created are replaced by the layer's.
CREATE TABLE IF NOT EXISTS view_layer (
    digest VARCHAR NOT NULL
);
