-- Per crawl round: fetch attempts, successes, failures, bytes, first and last request time.
SELECT round,
       count(*)                                               AS attempts,
       count(*) FILTER (WHERE outcome IN ('ok', 'truncated')) AS ok,
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                              AS failed,
       count(DISTINCT url_host_name)                          AS hosts,
       CAST(coalesce(sum(content_length), 0) AS BIGINT)       AS content_bytes,
       min(fetch_time)                                        AS first_fetch,
       max(fetch_time)                                        AS last_fetch,
       date_diff('millisecond', min(fetch_time), max(fetch_time)) / 1000.0 AS span_s
FROM fetched
GROUP BY round
ORDER BY round;
