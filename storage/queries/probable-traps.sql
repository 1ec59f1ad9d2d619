-- Hosts flagged as probable spider traps by the fetch workers (hosts.trap: 'near' when most recent
-- pages are near-duplicates, 'path' when paths repeat segments), with their pages fetched and URLs
-- still queued (generate throttles them to dedup.trap_max_urls_per_host per round).
SELECT h.host, h.trap, h.pages_fetched,
       count(f.url_key) FILTER (WHERE f.status = 'queued') AS queued
FROM hosts h LEFT JOIN frontier f ON f.host = h.host
WHERE h.trap IS NOT NULL
GROUP BY h.host, h.trap, h.pages_fetched
ORDER BY queued DESC, h.host;
