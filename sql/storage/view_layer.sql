-- The digest of the views layer (sql/views/) the history's views were created from.
SELECT digest FROM view_layer;
