-- Lets the service-graph rollup hold a projection (0104), as 0100 does for the RED rollup.
ALTER TABLE hotspan_service_graph_minutes MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild'
