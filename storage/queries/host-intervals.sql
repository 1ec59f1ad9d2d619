-- Per host: gaps between consecutive request starts within a round (seconds) vs its effective delay.
WITH gaps AS (
    SELECT url_host_name AS host,
           date_diff('millisecond',
                     lag(fetch_time) OVER (PARTITION BY url_host_name, round ORDER BY fetch_time),
                     fetch_time) / 1000.0 AS gap_s
    FROM fetched
    WHERE outcome NOT IN ('robots_denied', 'robots_unavailable', 'host_unreachable', 'rate_limited', 'refused', 'dns_error', 'not_fetched')
)
SELECT g.host,
       count(*)            AS gaps,
       min(g.gap_s)        AS min_gap_s,
       median(g.gap_s)     AS median_gap_s,
       any_value(h.host_delay_s)  AS host_delay_s,
       any_value(h.crawl_delay_s) AS crawl_delay_s
FROM gaps AS g
LEFT JOIN hosts AS h ON h.host = g.host
WHERE g.gap_s IS NOT NULL
GROUP BY g.host
ORDER BY gaps DESC, g.host;
