-- The views of the layer that the role $role may not read yet and that this writer may grant (it owns them);
-- none when the server has no such role.
SELECT v.name
FROM unnest(CAST($views AS VARCHAR[])) AS v(name)
WHERE CASE
    WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $role) THEN FALSE
    WHEN to_regclass(quote_ident(v.name)) IS NULL THEN FALSE
    WHEN NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = to_regclass(quote_ident(v.name))), 'USAGE')
        THEN FALSE
    ELSE NOT has_table_privilege($role, quote_ident(v.name), 'SELECT')
END
ORDER BY v.name;
