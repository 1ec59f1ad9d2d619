-- The 20 most frequent MIME types of responses, with the payload bytes stored for each.
SELECT coalesce(content_mime_type, '(none)')              AS mime_type,
       count(*)                                          AS responses,
       CAST(coalesce(sum(content_length), 0) AS BIGINT)  AS content_bytes
FROM fetched
WHERE fetch_status IS NOT NULL
GROUP BY 1
ORDER BY responses DESC, mime_type
LIMIT 20;
