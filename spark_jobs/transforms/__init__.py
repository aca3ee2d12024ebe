"""Building blocks of the jobs' pure transforms: CloudTrail decoding and schema, event-time windows, alert rules."""
