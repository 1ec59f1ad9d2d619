-- Fetch attempts by HTTP status (NULL: no response), most frequent first.
SELECT fetch_status,
       count(*) AS attempts
FROM fetched
GROUP BY fetch_status
ORDER BY attempts DESC, fetch_status NULLS LAST;
