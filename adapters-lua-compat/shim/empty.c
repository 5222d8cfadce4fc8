/* Intentionally empty: see build.rs. */
