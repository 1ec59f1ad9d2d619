-- robots.txt per host (status class of the last fetch) and URLs it kept from being fetched.
SELECT 'hosts' AS counted,
       CASE
           WHEN robots_fetch_time IS NULL THEN 'not fetched yet'
           WHEN robots_status IS NULL THEN 'unreachable: disallow all'
           WHEN robots_status BETWEEN 200 AND 299 THEN '2xx: rules parsed'
           WHEN robots_status BETWEEN 400 AND 499 THEN '4xx: allow all'
           ELSE '5xx: disallow all'
       END AS outcome,
       count(*) AS n
FROM hosts
GROUP BY 1, 2
UNION ALL
SELECT 'hosts', 'Crawl-delay set', count(*) FROM hosts WHERE crawl_delay_s IS NOT NULL
HAVING count(*) > 0
UNION ALL
SELECT 'urls', outcome, count(*)
FROM fetched
WHERE outcome IN ('robots_denied', 'robots_unavailable')
GROUP BY outcome
ORDER BY counted, n DESC, outcome;
