-- Recorded in the transaction that created the views, so the digest always names the views the history holds.
INSERT INTO view_layer (digest) VALUES ($digest);
