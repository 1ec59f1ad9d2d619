-- URLs per host and status: one row per host, one column per common status.
SELECT host,
       count(*)                                          AS urls,
       count(*) FILTER (WHERE status = 'queued')         AS queued,
       count(*) FILTER (WHERE status = 'fetched')        AS fetched,
       count(*) FILTER (WHERE status = 'redirect')       AS redirect,
       count(*) FILTER (WHERE status = 'gone')           AS gone,
       count(*) FILTER (WHERE status = 'error')          AS error,
       count(*) FILTER (WHERE status = 'robots_denied')  AS robots_denied,
       count(*) FILTER (WHERE status = 'filtered')       AS filtered,
       count(*) FILTER (WHERE status = 'refused')        AS refused
FROM frontier
GROUP BY host
ORDER BY urls DESC, host;
