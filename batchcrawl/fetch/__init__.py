"""Fetch workers: the BUbiNG workbench, HTTP fetcher, robots.txt, resolver and address policy, page
parsing, the WARC writer and the shard worker. Never imports frontier, round or cli."""
