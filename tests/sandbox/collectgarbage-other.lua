-- expect: option 'incremental' is not available
-- Retuning the collector.
collectgarbage("incremental", 1, 1)
print("ESCAPED")
