-- When URLs are due again (next_fetch_time), per status and day, soonest first.
-- Only the statuses that are ever due (frontier/due.py): queued and error URLs, and fetched and gone
-- ones the [recrawl] schedule gave a time; filtered, robots-denied and other final statuses are
-- never fetched again. avg_interval_s: their mean fetch interval, seconds; avg_interval: the same
-- in the largest unit that fits (s, min, h, d); both empty for URLs never fetched (queued).
SELECT status,
       date_trunc('day', next_fetch_time)   AS due_day,
       count(*)                             AS urls,
       min(next_fetch_time)                 AS first_due,
       round(avg(fetch_interval_s), 1)      AS avg_interval_s,
       CASE WHEN avg(fetch_interval_s) >= 86400 THEN round(avg(fetch_interval_s) / 86400, 1) || ' d'
            WHEN avg(fetch_interval_s) >= 3600  THEN round(avg(fetch_interval_s) / 3600, 1)  || ' h'
            WHEN avg(fetch_interval_s) >= 60    THEN round(avg(fetch_interval_s) / 60, 1)    || ' min'
            ELSE round(avg(fetch_interval_s), 1) || ' s'
       END                                  AS avg_interval
FROM frontier
WHERE next_fetch_time IS NOT NULL
  AND status IN ('queued', 'error', 'fetched', 'gone')
GROUP BY status, due_day
ORDER BY due_day, status
LIMIT 100
