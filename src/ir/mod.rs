pub mod shape;
