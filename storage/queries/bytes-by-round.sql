-- Bytes stored per crawl round: payload bytes and WARC bytes (compressed records), with running totals.
SELECT round,
       CAST(coalesce(sum(content_length), 0) AS BIGINT)     AS content_bytes,
       CAST(coalesce(sum(warc_record_length), 0) AS BIGINT) AS warc_bytes,
       CAST(sum(coalesce(sum(warc_record_length), 0)) OVER (ORDER BY round) AS BIGINT)
                                                            AS warc_bytes_total
FROM fetched
GROUP BY round
ORDER BY round;
