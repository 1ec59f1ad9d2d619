-- Fetch attempts per round and second, with how many failed: `second` counts from the round's
-- first request, `crawl_second` from the first request of the whole crawl (wall time; a stream's
-- micro-batches lie end to end on it).
WITH t AS (
    SELECT round,
           outcome,
           date_diff('millisecond', min(fetch_time) OVER (PARTITION BY round), fetch_time)
               // 1000 AS second,
           date_diff('millisecond', min(fetch_time) OVER (), fetch_time) // 1000 AS crawl_second
    FROM fetched
)
SELECT round,
       second,
       crawl_second,
       count(*)                                                                      AS attempts,
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                                                     AS failed
FROM t
GROUP BY round, second, crawl_second
ORDER BY round, second, crawl_second;
