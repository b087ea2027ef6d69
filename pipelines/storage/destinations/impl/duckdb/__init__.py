"""DuckDB, the history in one file: `factory.py` (the engine's hooks), `sql_client.py` (the file attached to
this process's database), `errors.py` (DuckDB's errors as scanwatch's), `read_door.py`, `backup.py`."""
