-- The 50 hosts with the most failed fetch attempts, with their attempts and most common error.
SELECT url_host_name                                                                AS host,
       count(*)                                                                     AS attempts,
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                                                    AS failed,
       mode(outcome) FILTER (WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified'))
                                                                                    AS top_outcome
FROM fetched
GROUP BY url_host_name
HAVING failed > 0
ORDER BY failed DESC, host
LIMIT 50;
