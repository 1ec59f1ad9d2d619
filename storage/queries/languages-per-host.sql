-- Pages (URLs) with extracted text per host and language (the first of content_languages, CLD2, ISO 639-1); each page counted once, by its newest capture with text (the page_text view).
SELECT url_host_name                                        AS host,
       coalesce(split_part(content_languages, ',', 1), '(none)') AS language,
       count(*)                                             AS pages,
       CAST(coalesce(sum(main_text_length), 0) AS BIGINT)   AS main_text_chars
FROM page_text
GROUP BY 1, 2
ORDER BY host, pages DESC, language;
