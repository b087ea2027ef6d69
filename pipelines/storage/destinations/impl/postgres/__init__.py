"""PostgreSQL, the history many machines share: `factory.py` (the engine's hooks), `sql_client.py` (a
connection set up for the history, the compatibility layer), `errors.py` (psycopg's errors as scanwatch's),
`sqltext.py` (statements and parameters, by SQLGlot's tokenizer), `stage_format.py` (COPY's text lines),
`deadline.py`, `read_door.py`, `backup.py`. Its SQL is `sql/engines/postgres/`."""
