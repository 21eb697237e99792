-- Builds 0104's projection for the parts stored before it (as 0102).
ALTER TABLE hotspan_service_graph_minutes MATERIALIZE PROJECTION by_time
