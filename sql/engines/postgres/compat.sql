-- The compatibility layer of a PostgreSQL history: the few DuckDB functions scanwatch's SQL uses and
-- PostgreSQL 15 lacks, under DuckDB's names and with DuckDB's results, so each statement has one text that
-- both engines run (docs/history.md, "One SQL text, two engines"). The PostgreSQL engine creates them in the
-- history's schema when it opens a history whose copy differs from this file (pipelines/storage/engines/).
-- Everything here is CREATE OR REPLACE: applying it again changes nothing.

-- epoch(timestamptz): seconds since 1970-01-01 UTC as a double, as DuckDB's epoch() gives them. STABLE, as
-- date_part of a timestamptz is: a SQL function is inlined into the query that calls it only when it claims no
-- more than its body, and called row by row otherwise (declared IMMUTABLE, it cost about 20 us a call: most of
-- time_to_fix_by_project's 9 s at 390k issues). date_part computes the double itself (the microseconds, exact in
-- a double before the year 2255, divided once: the value extract's numeric rounds to), at a third of its cost.
CREATE OR REPLACE FUNCTION epoch(value timestamptz) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT
AS $$ SELECT date_part('epoch', value) $$;

-- round(double, digits): DuckDB rounds a double to a number of digits and gives a double; PostgreSQL 15 rounds
-- only a numeric that way. Half away from zero, as both do for a numeric.
CREATE OR REPLACE FUNCTION round(value double precision, digits integer) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT
AS $$ SELECT CAST(round(CAST(value AS numeric), digits) AS double precision) $$;

-- arg_max(value, key) / arg_min(value, key): the value of the row with the greatest (least) key, as DuckDB's
-- aggregates: rows whose value or key is NULL are left out, and no row left gives NULL. Any value type with
-- any ordered key type: the state keeps both as text, and the key is compared as its own type again.
CREATE OR REPLACE FUNCTION scanwatch_arg_max_step(state text[], value anyelement, key anycompatible)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE best key%TYPE;
BEGIN
    IF value IS NULL OR key IS NULL THEN RETURN state; END IF;
    IF state IS NOT NULL THEN
        best := state[2];
        IF key <= best THEN RETURN state; END IF;
    END IF;
    RETURN ARRAY[CAST(value AS text), CAST(key AS text)];
END $$;

CREATE OR REPLACE FUNCTION scanwatch_arg_min_step(state text[], value anyelement, key anycompatible)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE best key%TYPE;
BEGIN
    IF value IS NULL OR key IS NULL THEN RETURN state; END IF;
    IF state IS NOT NULL THEN
        best := state[2];
        IF key >= best THEN RETURN state; END IF;
    END IF;
    RETURN ARRAY[CAST(value AS text), CAST(key AS text)];
END $$;

CREATE OR REPLACE FUNCTION scanwatch_arg_final(state text[], value anyelement, key anycompatible)
RETURNS anyelement LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE found value%TYPE;
BEGIN
    found := state[1];
    RETURN found;
END $$;

CREATE OR REPLACE AGGREGATE arg_max(anyelement, anycompatible) (
    SFUNC = scanwatch_arg_max_step, STYPE = text[], FINALFUNC = scanwatch_arg_final, FINALFUNC_EXTRA
);
CREATE OR REPLACE AGGREGATE arg_min(anyelement, anycompatible) (
    SFUNC = scanwatch_arg_min_step, STYPE = text[], FINALFUNC = scanwatch_arg_final, FINALFUNC_EXTRA
);

-- The typed staging of an API list (pipelines/storage/merge.py) casts each text column to its type and keeps
-- a value that does not fit as NULL, listed in ingest_warnings: DuckDB's TRY_CAST. PostgreSQL 15 has no
-- TRY_CAST, so the engine first casts plainly (the usual case, at full speed) and only when a value fails
-- does it stage the list again through these, which catch the failure one value at a time.
CREATE OR REPLACE FUNCTION scanwatch_try_integer(value text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
DECLARE number numeric;
BEGIN
    number := CAST(value AS numeric);
    -- A line or a count that is not a whole number is kept out rather than rounded (DuckDB would round).
    IF number <> trunc(number) THEN RETURN NULL; END IF;
    RETURN CAST(number AS integer);
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION scanwatch_try_double(value text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
BEGIN RETURN CAST(value AS double precision);
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION scanwatch_try_boolean(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
BEGIN RETURN CAST(value AS boolean);
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION scanwatch_try_timestamptz(value text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
BEGIN RETURN CAST(value AS timestamptz);
EXCEPTION WHEN others THEN RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION scanwatch_try_json(value text) RETURNS json
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
BEGIN RETURN CAST(value AS json);
EXCEPTION WHEN others THEN RETURN NULL;
END $$;
