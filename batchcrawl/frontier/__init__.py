"""The frontier (Nutch's CrawlDb): the URL status table in DRUM buckets, and the steps that change
it: inject, generate (fetch lists) and update (IRLbot's DRUM check/update). Never imports fetch."""
