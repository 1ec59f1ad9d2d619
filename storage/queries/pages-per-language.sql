-- Pages (URLs) with extracted text per language (the first of content_languages, CLD2, ISO 639-1), with their hosts; each page counted once, by its newest capture with text (the page_text view: a refetch or a 304 revisit repeats a page, it is not another one).
SELECT coalesce(split_part(content_languages, ',', 1), '(none)') AS language,
       count(*)                                             AS pages,
       count(DISTINCT url_host_name)                        AS hosts,
       CAST(coalesce(sum(main_text_length), 0) AS BIGINT)   AS main_text_chars
FROM page_text
GROUP BY 1
ORDER BY pages DESC, language;
