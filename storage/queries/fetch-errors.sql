-- Failed fetch attempts grouped by outcome, HTTP status and error, with one example URL each.
SELECT outcome,
       fetch_status,
       error,
       count(*)     AS attempts,
       min(url)     AS example_url
FROM fetched
WHERE outcome NOT IN ('ok', 'truncated', 'redirect', 'not_modified')
GROUP BY outcome, fetch_status, error
ORDER BY attempts DESC, outcome, fetch_status, error;
