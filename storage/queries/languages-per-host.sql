-- Pages (URLs) with extracted text per host and language (the first of content_languages, CLD2, ISO 639-1); each page counted once, by its newest capture with text.
WITH page AS (
    SELECT url_host_name, content_languages, main_text_length
    FROM text
    QUALIFY row_number() OVER (PARTITION BY url_key
                               ORDER BY content_languages IS NULL, main_text_length IS NULL,
                                        fetch_time DESC) = 1
)
SELECT url_host_name                                        AS host,
       coalesce(split_part(content_languages, ',', 1), '(none)') AS language,
       count(*)                                             AS pages,
       CAST(coalesce(sum(main_text_length), 0) AS BIGINT)   AS main_text_chars
FROM page
GROUP BY 1, 2
ORDER BY host, pages DESC, language;
