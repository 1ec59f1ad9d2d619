-- Fetch attempts per round and second since the round's first request, with how many failed.
WITH t AS (
    SELECT round,
           outcome,
           date_diff('millisecond', min(fetch_time) OVER (PARTITION BY round), fetch_time)
               // 1000 AS second
    FROM fetched
)
SELECT round,
       second,
       count(*)                                                                      AS attempts,
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                                                     AS failed
FROM t
GROUP BY round, second
ORDER BY round, second;
