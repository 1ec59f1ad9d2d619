-- The 20 most frequent MIME types of responses, with the payload bytes stored for each; a response
-- without a Content-Type is '(not modified)' for a 304 (it has no body), '(redirect)' for another
-- 3xx, else '(none)'.
SELECT coalesce(content_mime_type,
                CASE WHEN fetch_status = 304 THEN '(not modified)'
                     WHEN fetch_status BETWEEN 300 AND 399 THEN '(redirect)'
                     ELSE '(none)' END)                  AS mime_type,
       count(*)                                          AS responses,
       CAST(coalesce(sum(content_length), 0) AS BIGINT)  AS content_bytes
FROM fetched
WHERE fetch_status IS NOT NULL
GROUP BY 1
ORDER BY responses DESC, mime_type
LIMIT 20;
