-- batchcrawl table schemas: the one definition of every table in a crawl directory (DESIGN §3).
-- Arrow schemas are derived from this file at run time (batchcrawl/schemas.py); every writer validates
-- against them. Times are UTC. url_key is the unsigned 64-bit murmur3 of the canonical URL.

-- frontier/gen=G/bucket=BBB.parquet (base) and bucket=BBB.run.parquet (delta runs): one row per URL
-- (Nutch's CrawlDb), each file sorted by url_key; the newest file of a bucket wins per url_key.
CREATE TABLE frontier (
    url_key          UBIGINT   NOT NULL, -- mmh3 64-bit of the canonical url
    url              VARCHAR   NOT NULL, -- canonical URL (batchcrawl.urls.canonicalize)
    host             VARCHAR   NOT NULL, -- lower-case host (punycode), without port
    domain           VARCHAR   NOT NULL, -- pay-level domain (Public Suffix List)
    depth            INTEGER   NOT NULL, -- link hops from a seed (seeds: 0)
    hops_out         INTEGER   NOT NULL, -- consecutive hops outside the seed scope
    status           VARCHAR   NOT NULL, -- queued, fetched, redirect, gone, error, robots_denied, filtered, refused
    reason           VARCHAR,            -- why: 'max_depth' for filtered, '404' for gone, 'timeout' for error ...
    discovered_round INTEGER   NOT NULL, -- round in which the URL was first seen (0 = injected)
    discovered_seq   BIGINT    NOT NULL, -- order of discovery inside that round: breadth-first order
    source_url_key   UBIGINT,            -- page (or redirect) that first linked here; NULL for seeds
    fetch_time       TIMESTAMP_MS,       -- last fetch attempt
    fetch_status     SMALLINT,           -- last HTTP status; NULL when no response
    content_digest   VARCHAR,            -- 'sha1:BASE32' of the payload of the capture stored last (a 200, or truncated; not a 304 or a 404 body)
    retries          INTEGER   NOT NULL, -- transient failures since the last success
    next_fetch_time  TIMESTAMP_MS,       -- due from this time (new URLs: discovery time; retries: backoff; fetched/gone: the [recrawl] schedule); NULL = never due by time
    lease_round      INTEGER,            -- round holding the URL on a fetch list; NULL = not leased
    lease_shard      INTEGER,            -- shard holding the lease
    fetch_interval_s DOUBLE,             -- current refetch interval of the [recrawl] schedule, seconds; NULL before the first fetch
    etag             VARCHAR,            -- ETag of the last 200/304, sent back as If-None-Match
    last_modified    VARCHAR,            -- Last-Modified of the last 200/304, sent back as If-Modified-Since
    content_fetch_time TIMESTAMP_MS      -- fetch time of the response record content_digest comes from (an unchanged 200, written as a revisit, keeps it): a revisit's WARC-Refers-To-Date
);

-- hosts/gen=G/shard=SS.parquet: per-host state carried across rounds (the workbench's persisted form).
CREATE TABLE hosts (
    host              VARCHAR   NOT NULL,
    shard             INTEGER   NOT NULL,
    ip                VARCHAR,            -- last resolved address
    next_fetch_time   TIMESTAMP_MS,       -- politeness clock: no request to this host before this time
    host_delay_s      DOUBLE    NOT NULL, -- effective delay (config floor, Crawl-delay, adaptive)
    robots_status     SMALLINT,           -- HTTP status of the last robots.txt fetch; NULL = network failure
    robots_txt        VARCHAR,            -- body parsed (capped at robots.max_bytes)
    robots_fetch_time TIMESTAMP_MS,
    robots_expires    TIMESTAMP_MS,       -- cache entry not used after this time
    crawl_delay_s     DOUBLE,             -- Crawl-delay for our agent, if any
    sitemaps          VARCHAR[],          -- Sitemap lines of robots.txt
    pages_fetched     BIGINT    NOT NULL, -- cumulative fetch attempts that got a response
    errors            BIGINT    NOT NULL, -- cumulative failed attempts
    robots_origin     VARCHAR,            -- scheme://host[:port] the robots_* columns belong to (RFC 9309 §2.3); NULL in rows written before it: not restored
    trap              VARCHAR,            -- probable spider trap: 'near' (near-duplicates), 'path' (repeating segments); NULL: no
    held_reason       VARCHAR,            -- the host is held (batchcrawl.fetch.holds): 'robots_unavailable' (robots.txt 5xx or unreachable, RFC 9309 §2.3.1.4), 'rate_limit' (429/503; remembered until politeness.rate_limit_quiet_s after held_until), 'unreachable' (politeness.unreachable_failures fetches in a row without an answer; ended by any answer); NULL: not held (or a row written before holds)
    held_since        TIMESTAMP_MS,       -- first failure of the current outage
    held_until        TIMESTAMP_MS,       -- no request to the host and no fetch list carrying its URLs before this time (back-off doubling up to robots.max_hold_s / politeness.max_rate_limit_backoff_s, jittered)
    held_failures     INTEGER,            -- consecutive failures of the outage; not held (held_reason NULL): the fetches in a row the host did not answer, counted toward politeness.unreachable_failures across rounds
    content_signal    VARCHAR             -- robots.txt Content-Signal for our agent's group, normalized ('search=yes,ai-train=no'; contentsignals.org); NULL: none (or a row written before the column)
);

-- fetchlists/round=R/shard=SS.parquet: what generate handed to one shard, per host in breadth-first order.
CREATE TABLE fetchlists (
    round            INTEGER  NOT NULL,
    shard            INTEGER  NOT NULL,
    url_key          UBIGINT  NOT NULL,
    url              VARCHAR  NOT NULL,
    host             VARCHAR  NOT NULL,
    domain           VARCHAR  NOT NULL,
    depth            INTEGER  NOT NULL,
    hops_out         INTEGER  NOT NULL,
    discovered_round INTEGER  NOT NULL,
    discovered_seq   BIGINT   NOT NULL,
    retries          INTEGER  NOT NULL,
    etag             VARCHAR,          -- conditional GET validators of the last capture (frontier)
    last_modified    VARCHAR,
    content_fetch_time TIMESTAMP_MS,   -- when the last capture was fetched (revisit refers-to date)
    content_digest   VARCHAR           -- payload digest of that capture (an unchanged 200 is a revisit)
);

-- fetched/round=R/shard=SS.parquet: one row per fetch attempt. Column names follow Common Crawl's
-- cc-index-table where the meaning is the same.
CREATE TABLE fetched (
    url_key                    UBIGINT  NOT NULL,
    url                        VARCHAR  NOT NULL,
    url_host_name              VARCHAR  NOT NULL,
    url_host_registered_domain VARCHAR  NOT NULL,
    fetch_time                 TIMESTAMP_MS NOT NULL, -- start of the request
    fetch_status               SMALLINT,              -- HTTP status; NULL when no response
    outcome                    VARCHAR  NOT NULL,     -- batchcrawl.records.Outcome value
    error                      VARCHAR,               -- 'timeout', 'connect', 'reset', 'body_short', ...
    fetch_redirect             VARCHAR,               -- Location target (canonical) of a 3xx
    content_digest             VARCHAR,               -- 'sha1:BASE32' of the payload, as in WARC
    content_mime_type          VARCHAR,               -- Content-Type type/subtype, lower-case (RFC 9110 §8.3.1); NULL if absent or malformed
    content_charset            VARCHAR,               -- charset used to decode the page
    content_length             BIGINT,                -- payload bytes stored
    content_truncated          VARCHAR,               -- NULL, 'length' or 'time' (cc-index meaning)
    fetch_ip                   VARCHAR,               -- address connected to
    download_s                 DOUBLE,                -- request start to last byte, seconds
    depth                      INTEGER  NOT NULL,
    round                      INTEGER  NOT NULL,
    shard                      INTEGER  NOT NULL,
    warc_filename              VARCHAR,               -- relative to the crawl directory
    warc_record_offset         BIGINT,
    warc_record_length         BIGINT,
    robots_noindex             BOOLEAN,               -- meta robots or X-Robots-Tag noindex
    robots_nofollow            BOOLEAN,               -- meta robots or X-Robots-Tag nofollow
    etag                       VARCHAR,               -- ETag of the response (a 304 without one: the one sent); NULL if malformed
    last_modified              VARCHAR,               -- Last-Modified of the response as IMF-fixdate, any HTTP-date form read (likewise); NULL if malformed
    canonical_url              VARCHAR,               -- <link rel=canonical> target, else a Link: <..>; rel="canonical" header's, absolute
    retry_after_s              DOUBLE,                -- Retry-After of a 429/503 in seconds (capped); NULL if none or malformed
    duplicate_of               UBIGINT,               -- url_key of the first URL with this payload digest (known at fetch time)
    simhash                    UBIGINT,               -- 64-bit SimHash of the visible text, digits masked (HTML pages)
    simhash_version            UTINYINT,              -- definition of simhash (batchcrawl.fetch.simhash.VERSION); compare fingerprints of one version only; NULL with simhash, or in files written before version 2 (their simhash is version 1)
    near_duplicate_of          UBIGINT,               -- url_key of an earlier page of the host within dedup.near_hamming bits
    header_errors              VARCHAR                -- response header fields present but unusable, comma-separated (content_type, etag, last_modified, date, retry_after); their columns are NULL (batchcrawl.fetch.fields); NULL: none, or a file written before the column
);

-- links/round=R/shard=SS.parquet: outlinks (and redirect targets) found in a round, in discovery order.
CREATE TABLE links (
    round          INTEGER NOT NULL,
    shard          INTEGER NOT NULL,
    seq            BIGINT  NOT NULL, -- discovery order inside (round, shard)
    src_url_key    UBIGINT NOT NULL,
    dst_url_key    UBIGINT NOT NULL,
    dst_url        VARCHAR NOT NULL, -- canonical
    dst_host       VARCHAR NOT NULL,
    dst_domain     VARCHAR NOT NULL,
    depth          INTEGER NOT NULL, -- depth of dst through this link (src depth + 1)
    hops_out       INTEGER NOT NULL, -- hops outside the seed scope through this link
    tag            VARCHAR NOT NULL, -- a, area, link, frame, iframe, meta_refresh, redirect, sitemap
    nofollow       BOOLEAN NOT NULL, -- rel=nofollow or robots meta nofollow (not crawled)
    filter_reason  VARCHAR,          -- NULL: in scope; else the filter that rejected it
    lastmod        TIMESTAMP_MS      -- sitemap <lastmod> (tag sitemap): a known URL changed after its last capture is due now
);

-- edges/round=R/shard=SS.parquet: every outlink of every page fetched in a round (the link graph,
-- MRS §20.4), canonicalized but before the URL cache and whatever the scope filters decide: the
-- graph is the web as seen, scope decides only what is crawled. One row per link occurrence
-- (duplicates kept here; the graph build drops them). Rows grouped by source bucket.
CREATE TABLE edges (
    src_url_key UBIGINT NOT NULL, -- page the link is on
    dst_url_key UBIGINT NOT NULL, -- canonical link target
    round       INTEGER NOT NULL,
    tag         VARCHAR NOT NULL, -- a, area, link, frame, iframe, meta_refresh, redirect
    src_domain  VARCHAR,          -- pay-level domains of both ends (STAR in-degree); NULL in files
    dst_domain  VARCHAR           -- written before they existed
);

-- domainlinks/gen=G/bucket=BBB[.run].parquet: the pay-level-domain link graph (IRLbot's STAR,
-- §6): one row per distinct (src_domain, dst_domain) pair with src_domain <> dst_domain, from
-- the committed rounds' edges; DRUM buckets by pair_key, base + runs like content.
CREATE TABLE domainlinks (
    pair_key    UBIGINT NOT NULL, -- hash64 of src_domain || ' ' || dst_domain: bucket and sort key
    src_domain  VARCHAR NOT NULL,
    dst_domain  VARCHAR NOT NULL,
    round       INTEGER NOT NULL  -- first round the pair was seen
);

-- indegree/gen=G/indegree.parquet: per pay-level domain, the distinct other pay-level domains
-- linking to it (the count of its domainlinks rows): STAR's budget input.
CREATE TABLE indegree (
    domain          VARCHAR NOT NULL,
    linking_domains BIGINT  NOT NULL,
    round           INTEGER NOT NULL  -- last round it grew
);

-- content/gen=G/bucket=BBB[.run].parquet: content seen (MRS §20.2.2), one row per payload digest
-- with the first URL fetched with it; DRUM buckets by digest_key, base + delta runs like the
-- frontier (the first fetch wins: a run holds only digests new in its round).
CREATE TABLE content (
    digest_key  UBIGINT      NOT NULL, -- hash64 of content_digest: bucket and sort key
    digest      VARCHAR      NOT NULL, -- 'sha1:BASE32' of the payload
    url_key     UBIGINT      NOT NULL, -- first URL fetched with this payload
    url         VARCHAR      NOT NULL,
    round       INTEGER      NOT NULL,
    fetch_time  TIMESTAMP_MS NOT NULL
);

-- graph/gen=G/nodes/part=PPP.parquet: the nodes of one partition of the link graph built from
-- generation G's edges (batchcrawl graph build), sorted by url_key; a node's id is the partition's
-- first id (graph/gen=G/graph.json) plus its row number.
CREATE TABLE graph_nodes (
    url_key UBIGINT NOT NULL,
    url     VARCHAR           -- canonical URL from the frontier; NULL if the frontier has no row
);

-- text/round=R/<WARC name>.parquet: text, language and page metadata of the HTML captures of one
-- WARC file (batchcrawl extract, docs/design.md §8d), read from the committed WARC files without
-- refetching. One row per HTML 200 response record and per revisit record; a revisit row holds no
-- text of its own: the `text` view gives it the text of the row with its payload digest.
-- Lengths are in characters.
CREATE TABLE text (
    url_key             UBIGINT      NOT NULL,
    url                 VARCHAR      NOT NULL, -- canonical URL (as in fetched)
    url_host_name       VARCHAR      NOT NULL,
    fetch_time          TIMESTAMP_MS NOT NULL,
    round               INTEGER      NOT NULL,
    shard               INTEGER      NOT NULL,
    record_type         VARCHAR      NOT NULL, -- response or revisit (WARC-Type)
    content_digest      VARCHAR,               -- 'sha1:BASE32' of the payload (a revisit: of the capture it repeats)
    content_languages   VARCHAR,               -- ISO 639-1 codes, most of the text first, comma-separated (Common Crawl's column; CLD2)
    language_shares     SMALLINT[],            -- percent of the text in each of content_languages
    language_reliable   BOOLEAN,               -- CLD2's verdict on its answer
    title               VARCHAR,
    main_text           VARCHAR,               -- text without boilerplate (navigation, headers, footers)
    main_text_length    INTEGER,
    visible_text_length INTEGER,               -- all visible text of the page
    meta_description    VARCHAR,
    meta_keywords       VARCHAR,
    structured_types    VARCHAR[],             -- JSON-LD @type and microdata itemtype values
    outlinks            INTEGER,               -- <a href>/<area href> links (not #, javascript:, mailto:)
    charset             VARCHAR,               -- charset the page was decoded with
    reason              VARCHAR,               -- NULL: text extracted; else why not or not all: no_text, binary, undecodable, truncated, revisit
    warc_filename       VARCHAR      NOT NULL, -- the capture's WARC file, relative to the crawl directory
    warc_record_offset  BIGINT       NOT NULL,
    wet_filename        VARCHAR,               -- its conversion record in the WET file beside it; NULL: none written
    wet_record_offset   BIGINT,
    wet_record_length   BIGINT
);
