-- Fetch attempts per crawl round and outcome (ok, redirect, gone, network_error, ...).
SELECT round,
       outcome,
       count(*) AS attempts
FROM fetched
GROUP BY round, outcome
ORDER BY round, outcome;
