-- When URLs are due again (next_fetch_time, from the [recrawl] schedule): per status and day, soonest first.
SELECT status,
       date_trunc('day', next_fetch_time)   AS due_day,
       count(*)                             AS urls,
       min(next_fetch_time)                 AS first_due,
       round(avg(fetch_interval_s) / 86400, 2) AS avg_interval_days
FROM frontier
WHERE next_fetch_time IS NOT NULL
GROUP BY status, due_day
ORDER BY due_day, status
LIMIT 100
