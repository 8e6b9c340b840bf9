#version 330 core
// Writes the object id into an R32I target (cleared to -1), depth-tested.
flat in int v_id;

out int f_id;

void main() {
    f_id = v_id;
}
