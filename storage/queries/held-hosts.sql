-- Hosts held by the crawl (hosts.held_reason, batchcrawl.fetch.holds): 'robots_unavailable' while
-- robots.txt answers 5xx or cannot be reached (RFC 9309 §2.3.1.4; until robots.txt answers again),
-- 'rate_limit' after 429/503 answers (while the back-off is in force), 'unreachable' after fetches in
-- a row got no answer (until the host answers again). Their URLs get no fetch-list slot until
-- held_until (once it has passed, the host's next fetch probes it: in_force is false);
-- held_failures counts the holds in a row (each failed retry doubles the next), not fetches;
-- outage_s is how long since the hold began (held_since to now, UTC; the failures that led to it
-- came before).
SELECT h.host, h.held_reason, h.held_since, h.held_until, h.held_failures,
       (epoch_us(now()) - epoch_us(h.held_since)) / 1e6 AS outage_s,
       count(f.url_key) FILTER (WHERE f.status = 'queued') AS queued,
       h.held_until > make_timestamp(epoch_us(now())) AS in_force
FROM hosts h LEFT JOIN frontier f ON f.host = h.host
WHERE h.held_reason IN ('robots_unavailable', 'unreachable') OR h.held_until > make_timestamp(epoch_us(now()))
GROUP BY ALL
ORDER BY outage_s DESC, h.host;
