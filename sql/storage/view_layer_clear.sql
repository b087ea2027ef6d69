-- The layer's views are dropped: the history holds none of them until they are created again.
DELETE FROM view_layer;
