-- The 50 hosts with the most fetch attempts, with their successes, errors and bytes stored.
SELECT url_host_name                                          AS host,
       count(*)                                               AS attempts,
       count(*) FILTER (WHERE outcome IN ('ok', 'truncated')) AS ok,
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                              AS failed,
       CAST(coalesce(sum(content_length), 0) AS BIGINT)       AS content_bytes
FROM fetched
GROUP BY url_host_name
ORDER BY attempts DESC, host
LIMIT 50;
