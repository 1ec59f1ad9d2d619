-- batchcrawl export tables (docs/design.md §3, "Export layout"): tables written to a data lake by
-- `batchcrawl export`, not to the crawl directory. Arrow schemas are derived from this file at run time
-- (batchcrawl/store/schemas.py), like schema.sql's.

-- index/crawl=NAME/round=N/part-SS.parquet: a Common Crawl-compatible columnar index of the WARC
-- captures of a round (batchcrawl/export/ccindex.py). Column names, order and types follow Common
-- Crawl's cc-index-table (commoncrawl/cc-index-table, cc-index-schema-flat.json; Spark short = SMALLINT,
-- integer = INTEGER, timestamp = TIMESTAMP_MS, UTC without zone). `crawl` is written as the Hive
-- partition, not in the files.
CREATE TABLE "index" (
    url_surtkey                VARCHAR      NOT NULL, -- SURT form of url (batchcrawl.urls.surt)
    url                        VARCHAR      NOT NULL,
    url_host_name              VARCHAR      NOT NULL,
    url_host_tld               VARCHAR,               -- last label of the host; NULL for an IP address
    url_host_2nd_last_part     VARCHAR,
    url_host_3rd_last_part     VARCHAR,
    url_host_4th_last_part     VARCHAR,
    url_host_5th_last_part     VARCHAR,
    url_host_registry_suffix   VARCHAR,               -- ICANN section of the Public Suffix List
    url_host_registered_domain VARCHAR,
    url_host_private_suffix    VARCHAR,               -- the whole Public Suffix List
    url_host_private_domain    VARCHAR,
    url_host_name_reversed     VARCHAR,               -- labels in reverse order; NULL for an IP address
    url_protocol               VARCHAR      NOT NULL,
    url_port                   INTEGER,               -- NULL when the URL names no port
    url_path                   VARCHAR      NOT NULL,
    url_query                  VARCHAR,
    fetch_time                 TIMESTAMP_MS NOT NULL,
    fetch_status               SMALLINT     NOT NULL,
    fetch_redirect             VARCHAR,
    content_digest             VARCHAR,
    content_mime_type          VARCHAR,
    content_charset            VARCHAR,
    content_languages          VARCHAR,               -- ISO 639-1 codes, most of the text first (the crawl's text table, batchcrawl extract); NULL if not extracted
    content_truncated          VARCHAR,
    warc_filename              VARCHAR      NOT NULL, -- relative to the export destination
    warc_record_offset         INTEGER      NOT NULL, -- bytes
    warc_record_length         INTEGER      NOT NULL, -- bytes
    warc_segment               VARCHAR      NOT NULL, -- the round number
    crawl                      VARCHAR      NOT NULL, -- crawl name
    subset                     VARCHAR      NOT NULL, -- warc, crawldiagnostics or robotstxt
    content_signal             VARCHAR                -- not Common Crawl's: the host's robots.txt Content-Signal for our agent ('search=yes,ai-train=no'; hosts.content_signal of the crawl's current generation, batchcrawl/export/signals.py); NULL: none
);
