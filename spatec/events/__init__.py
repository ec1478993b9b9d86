"""Events in: files of records (CSV, Parquet, JSON lines, SIRI-VM polls) read, typed and
made canonical events, with every row that cannot be used counted as a reject."""
