-- URLs of the frontier by status (Nutch `readdb -stats`), most frequent first.
SELECT status, count(*) AS urls
FROM frontier
GROUP BY status
ORDER BY urls DESC, status;
