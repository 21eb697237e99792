-- Builds 0101's projection for the parts stored before it (a background mutation; reads use the table itself for
-- a part until its projection is built, so nothing reads differently meanwhile). Parts written after 0101 have it.
ALTER TABLE hotspan_red_minutes MATERIALIZE PROJECTION by_time
