"""What a person at a terminal (or an Airflow log) sees: progress lines and the live table, the
closing summaries, the `status` and `sql` layouts, the one-line messages for a stop signal, for
nothing due and for a lost worker or a full disk. Library steps return data; this package words it."""
