-- URLs of the frontier by depth (link hops from a seed), with how many were fetched.
SELECT depth,
       count(*)                                   AS urls,
       count(*) FILTER (WHERE status = 'fetched') AS fetched
FROM frontier
GROUP BY depth
ORDER BY depth;
