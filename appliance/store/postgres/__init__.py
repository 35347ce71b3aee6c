"""The server backend: one PostgreSQL database shared by many processes on many hosts
(``--db postgresql://…``; needs the ``[postgres]`` extra: psycopg 3, and pgvector on the server)."""
