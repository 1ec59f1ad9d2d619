-- Fetches whose payload was first fetched at another URL (content seen, MRS §20.2.2): every
-- duplicate, including those fetched by another shard in the same round (known only at update
-- time, so their fetched.duplicate_of is NULL and their WARC record is a response).
SELECT f.url,
       f.round,
       f.shard,
       c.url                   AS first_url,
       c.round                 AS first_round,
       f.duplicate_of IS NOT NULL AS known_at_fetch
FROM fetched AS f
JOIN content AS c ON c.digest = f.content_digest
WHERE f.outcome IN ('ok', 'truncated') AND f.url_key <> c.url_key
ORDER BY f.round, f.url;
