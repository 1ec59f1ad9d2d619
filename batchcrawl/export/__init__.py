"""Export of committed rounds to a data lake: Parquet tables, WARC copies with CDXJ, and the Common
Crawl style index table."""
