-- URLs due now, by status: what the next round or a stream would select before its caps (frontier/due.py). Queued and error URLs whose next_fetch_time has come, and fetched and gone ones the [recrawl] schedule made due again (or inject --refetch); batchcrawl status and the closing summaries show their sum. on_held_hosts: those whose host is held now (hosts.held_until; batchcrawl.fetch.holds), which generate leaves out until the hold ends.
SELECT status, count(*) AS urls,
       count(*) FILTER (WHERE host IN (SELECT host FROM hosts
                                       WHERE held_until > timezone('UTC', now()))) AS on_held_hosts
FROM frontier
WHERE (status IN ('queued', 'error')
       AND coalesce(next_fetch_time, TIMESTAMP '1970-01-01') <= timezone('UTC', now()))
   OR (status IN ('fetched', 'gone') AND next_fetch_time <= timezone('UTC', now()))
GROUP BY status
ORDER BY urls DESC, status;
