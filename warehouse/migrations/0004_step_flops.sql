-- Contract schema version 2 (issue 32): the SDK's model FLOPs of one step and the dtype they run
-- in, the numerator and the peak's column of measured MFU. Rows from older agents have none.
ALTER TABLE step_samples ADD COLUMN flops_per_step DOUBLE;
ALTER TABLE step_samples ADD COLUMN compute_dtype VARCHAR;
